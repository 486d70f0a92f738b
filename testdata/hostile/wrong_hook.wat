;; Steers at the tool hook, where steer is not allowed (invalid-effect).
(module
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "[{\"kind\":\"steer\",\"text\":\"go on\"}]") ;; 33 bytes
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (call $effects (i32.const 0) (i32.const 33)))
    (i32.const 0)))
