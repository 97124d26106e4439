;; `grow N` returns `memory.grow N` on a one-page memory: the old size, or
;; -1 when growth is refused.
(module
  (memory 1)
  (func (export "grow") (param i32) (result i32)
    (memory.grow (local.get 0))))
