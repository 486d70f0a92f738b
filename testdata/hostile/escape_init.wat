;; wat2wasm: --no-check
;; The deadline escape in _initialize (see escape_global.wat): starting the
;; instance would spin for ever. Refused at load.
(module
  (memory (export "memory") 1)
  (func (export "_initialize")
    (loop $forever
      (global.set 0 (i32.const 0))
      (global.set 1 (i32.const 0x7fffffff))
      (br $forever)))
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
