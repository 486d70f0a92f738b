;; Hands over an effect of a kind ABI v1 does not have (invalid-effect).
(module
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "[{\"kind\":\"launch_missiles\"}]") ;; 28 bytes
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (call $effects (i32.const 0) (i32.const 28)))
    (i32.const 0)))
