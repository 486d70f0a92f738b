;; Marks itself as ABI v2 (refused at load: unknown major).
(module
  (memory (export "memory") 1)
  (func (export "wagent_abi_v2"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
