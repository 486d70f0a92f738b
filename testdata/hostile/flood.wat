;; Hands over 246,000 effects of 17 bytes each in one effects call of
;; 4,182,001 bytes, under the 4 MiB output limit: the count limit must stop
;; the decoder at effect 257 (limit), not after it has built all 246,000.
(module
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (memory (export "memory") 65)
  (data (i32.const 0) "{\"kind\":\"admit\"},") ;; 17 bytes
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (local $i i32)
    (local $p i32)
    (i32.store8 (i32.const 64) (i32.const 0x5b)) ;; "[" at 64
    (local.set $p (i32.const 65))
    (loop $more
      (memory.copy (local.get $p) (i32.const 0) (i32.const 17))
      (local.set $p (i32.add (local.get $p) (i32.const 17)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $more (i32.lt_u (local.get $i) (i32.const 246000))))
    (i32.store8 (i32.sub (local.get $p) (i32.const 1)) (i32.const 0x5d)) ;; "]" over the last ","
    (drop (call $effects (i32.const 64) (i32.sub (local.get $p) (i32.const 64))))
    (i32.const 0)))
