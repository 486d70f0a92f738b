;; Its manifest declares the prompt hook but it exports only a tool
;; handler (refused at load).
(module
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
