;; Hands over 8 MiB of "effects" in one call: over the output limit (limit).
(module
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (memory (export "memory") 129)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (call $effects (i32.const 0) (i32.const 0x800000)))
    (i32.const 0)))
