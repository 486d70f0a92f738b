;; remembers: a command op that breaks "instances never remember". It
;; counts its calls in a global and replies with the count, so a reused
;; instance answers the same view differently from a fresh one. The
;; conformance kit must fail it at command/deterministic.
(module
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "[{\22kind\22:\22reply\22,\22text\22:\22call 0\22}]") ;; 34 bytes, the digit at 94
  (global $n (mut i32) (i32.const 0))
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_command") (param $len i32) (result i32)
    (global.set $n (i32.add (global.get $n) (i32.const 1)))
    (i32.store8 (i32.const 94) (i32.add (i32.const 48) (i32.rem_u (global.get $n) (i32.const 10))))
    (drop (call $effects (i32.const 64) (i32.const 34)))
    (i32.const 0))
)
