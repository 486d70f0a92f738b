;; Emits one log effect per effects call, 100000 times: over the effect
;; count limit (limit).
(module
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "[{\"kind\":\"log\",\"text\":\"x\"}]") ;; 27 bytes
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (local $i i32)
    (loop $more
      (drop (call $effects (i32.const 0) (i32.const 27)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $more (i32.lt_u (local.get $i) (i32.const 100000))))
    (i32.const 0)))
