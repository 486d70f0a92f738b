;; Imports http_request without requesting the http capability in its
;; manifest (refused at load: a module does not take what it does not
;; ask for).
(module
  (import "wagent" "http_request" (func $http (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (call $http (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
    (i32.const 0)))
