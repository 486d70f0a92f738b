;; SIMD and a recursion without end (trap: stack overflow). Compiled with
;; wazero's checks instead of the rewriter's stack bound, the recursion
;; grew wazero's stack to its own ceiling: 196 MB of resident memory for a
;; 32 MiB op.
(module
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func $down (param $n i32) (param $v v128) (result i32)
    (i32.add
      (call $down (i32.add (local.get $n) (i32.const 1))
        (i32x4.replace_lane 1 (local.get $v) (i32x4.extract_lane 0 (local.get $v))))
      (i32.const 1)))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (call $down (i32.const 0) (v128.const i32x4 0 0 0 0)))
    (i32.const 0)))
