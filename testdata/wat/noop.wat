;; noop: the smallest wagent operation. Its tool handler returns at once
;; without reading anything, so a call measures only the host's own cost
;; per call (benchmarks). Build: see testdata/hostile/build.sh.
(module
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
