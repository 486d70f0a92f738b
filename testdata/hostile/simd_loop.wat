;; SIMD in a handler that loops for ever: the deadline must stop it, and
;; the host must stay responsive meanwhile (timeout). SIMD once sent a
;; module past the deadline rewriter to wazero's own checks.
(module
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (i8x16.shuffle 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
      (v128.load offset=16 (i32.const 0)) (v128.const i64x2 1 2)))
    (loop $forever (br $forever))
    (i32.const 0)))
