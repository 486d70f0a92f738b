;; Recurses without end (trap: stack overflow).
(module
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func $down (param $n i32) (result i32)
    (i32.add (call $down (i32.add (local.get $n) (i32.const 1))) (i32.const 1)))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (call $down (i32.const 0)))
    (i32.const 0)))
