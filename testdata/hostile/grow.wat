;; Grows memory a page at a time until the host refuses, then traps, as a
;; guest whose allocator failed would (memory).
(module
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (loop $more
      (br_if $more (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
    unreachable))
