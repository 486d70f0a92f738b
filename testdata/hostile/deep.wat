;; Hands over a tool whose parameters nest 100,000 arrays deep, which a
;; recursive decoder would follow on the host's stack: refused at depth 64
;; (abi).
(module
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (memory (export "memory") 4)
  (data (i32.const 0) "[{\"kind\":\"tool\",\"tool\":{\"name\":\"t\",\"parameters\":") ;; 48 bytes
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_contribute") (param i32) (result i32)
    (local $i i32)
    (loop $open
      (i32.store8 (i32.add (i32.const 48) (local.get $i)) (i32.const 0x5b))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $open (i32.lt_u (local.get $i) (i32.const 100000))))
    (loop $close
      (i32.store8 (i32.add (i32.const 48) (local.get $i)) (i32.const 0x5d))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $close (i32.lt_u (local.get $i) (i32.const 200000))))
    (i32.store (i32.add (i32.const 48) (local.get $i)) (i32.const 0x005d7d7d)) ;; "}}]"
    (drop (call $effects (i32.const 0) (i32.add (i32.const 51) (local.get $i))))
    (i32.const 0)))
