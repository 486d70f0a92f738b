;; Five tables, one more than a module may have (refused at load).
(module
  (memory (export "memory") 1)
  (table 1 funcref) (table 1 funcref) (table 1 funcref) (table 1 funcref) (table 1 funcref)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
