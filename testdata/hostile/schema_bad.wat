;; A config_schema the host must not follow or cannot use (see the
;; manifest): refused at load.
(module
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
