;; A table declared without a maximum, grown by 100,000,000 entries and
;; filled: the host bounds every table (a maximum of 1,048,576 entries is
;; written into the module), so the grow fails and the fill runs out of
;; bounds (trap), instead of taking 800 MB of the host's memory.
(module
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (table.grow $t (ref.null func) (i32.const 100000000)))
    (table.fill $t (i32.const 0) (ref.null func) (i32.const 100000000))
    (i32.const 0)))
