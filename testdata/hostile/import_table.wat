;; Imports a table, even from the host's own module name (refused at load).
(module
  (import "wagent" "table" (table 1 funcref))
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
