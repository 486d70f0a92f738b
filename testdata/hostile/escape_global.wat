;; wat2wasm: --no-check
;; The deadline escape: invalid as written (global.set 0 with no globals of
;; its own), so that a rewriter which appends its stop flag and budget as
;; the next global indices would make it valid, and the handler would keep
;; clearing the stop flag and refilling the budget, never to yield to Go
;; again. Refused at load: the module is validated as written.
(module
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (loop $forever
      (global.set 0 (i32.const 0))          ;; the stop flag
      (global.set 1 (i32.const 0x7fffffff)) ;; the budget
      (br $forever))
    (i32.const 0)))
