;; wat2wasm: --no-check
;; The function-index variant of the escape: the handler calls function 9,
;; which the module does not define (it has 3), hoping a rewriter adds
;; functions of its own there. Refused at load.
(module
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (call 9)
    (i32.const 0))
  (func $spare))
