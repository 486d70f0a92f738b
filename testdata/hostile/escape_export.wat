;; wat2wasm: --no-check
;; Exports global 0 without defining a global: after a naive rewrite it
;; would name the host's stop flag. Refused at load.
(module
  (memory (export "memory") 1)
  (export "flag" (global 0))
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
