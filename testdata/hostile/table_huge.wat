;; Declares a table of 100,000,000 entries: refused at load.
(module
  (memory (export "memory") 1)
  (table 100000000 funcref)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
