;; Imports a function outside the ABI namespace (refused at load).
(module
  (import "env" "abort" (func $abort))
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (call $abort)
    (i32.const 0)))
