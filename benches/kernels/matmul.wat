;; Dense f64 matrix multiply C = A x B of n x n matrices in linear memory
;; (A at 0, B after it, C after B), A and B filled deterministically first.
;; Returns the bits of the sum of C's diagonal, so both engines can be
;; compared exactly.
(module
  (memory 128)
  (func (export "run") (param $n i32) (result i64)
    (local $i i32) (local $j i32) (local $k i32)
    (local $a i32) (local $b i32) (local $c i32)
    (local $sum f64) (local $trace f64)
    (local.set $a (i32.const 0))
    (local.set $b (i32.mul (i32.mul (local.get $n) (local.get $n)) (i32.const 8)))
    (local.set $c (i32.mul (local.get $b) (i32.const 2)))
    ;; A[i][j] = (i + j) % 7, B[i][j] = (i * j) % 5
    (local.set $i (i32.const 0))
    (loop $fi
      (local.set $j (i32.const 0))
      (loop $fj
        (f64.store
          (i32.add (local.get $a)
            (i32.shl (i32.add (i32.mul (local.get $i) (local.get $n)) (local.get $j)) (i32.const 3)))
          (f64.convert_i32_u (i32.rem_u (i32.add (local.get $i) (local.get $j)) (i32.const 7))))
        (f64.store
          (i32.add (local.get $b)
            (i32.shl (i32.add (i32.mul (local.get $i) (local.get $n)) (local.get $j)) (i32.const 3)))
          (f64.convert_i32_u (i32.rem_u (i32.mul (local.get $i) (local.get $j)) (i32.const 5))))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br_if $fj (i32.lt_u (local.get $j) (local.get $n))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $fi (i32.lt_u (local.get $i) (local.get $n))))
    (local.set $i (i32.const 0))
    (loop $li
      (local.set $j (i32.const 0))
      (loop $lj
        (local.set $sum (f64.const 0))
        (local.set $k (i32.const 0))
        (loop $lk
          (local.set $sum
            (f64.add (local.get $sum)
              (f64.mul
                (f64.load (i32.add (local.get $a)
                  (i32.shl (i32.add (i32.mul (local.get $i) (local.get $n)) (local.get $k)) (i32.const 3))))
                (f64.load (i32.add (local.get $b)
                  (i32.shl (i32.add (i32.mul (local.get $k) (local.get $n)) (local.get $j)) (i32.const 3)))))))
          (local.set $k (i32.add (local.get $k) (i32.const 1)))
          (br_if $lk (i32.lt_u (local.get $k) (local.get $n))))
        (f64.store
          (i32.add (local.get $c)
            (i32.shl (i32.add (i32.mul (local.get $i) (local.get $n)) (local.get $j)) (i32.const 3)))
          (local.get $sum))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br_if $lj (i32.lt_u (local.get $j) (local.get $n))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $li (i32.lt_u (local.get $i) (local.get $n))))
    (local.set $i (i32.const 0))
    (loop $tr
      (local.set $trace (f64.add (local.get $trace)
        (f64.load (i32.add (local.get $c)
          (i32.shl (i32.mul (local.get $i) (i32.add (local.get $n) (i32.const 1))) (i32.const 3))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $tr (i32.lt_u (local.get $i) (local.get $n))))
    (i64.reinterpret_f64 (local.get $trace))))
