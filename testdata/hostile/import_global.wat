;; Imports a global: a module's globals are its own (refused at load).
(module
  (import "env" "g" (global i32))
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
