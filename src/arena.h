// arena.h — a bump allocator that can also only count. Every object with a
// lifetime (model metadata, session state) is carved by one function that
// runs twice: once counting (base == nullptr) to size the memory, once
// placing. The estimate and the real layout therefore cannot drift apart.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace gb {

class Arena {
 public:
  static constexpr size_t kAlign = 64;

  // Counting mode: nothing is placed, every alloc returns nullptr.
  Arena() = default;
  // Placing mode over [base, base + cap); base must be kAlign-aligned.
  Arena(void *base, size_t cap) : base_(static_cast<uint8_t *>(base)), cap_(cap) {}

  bool counting() const { return base_ == nullptr; }
  size_t used() const { return used_; }

  // bytes at `align` (power of two). nullptr when counting or past capacity
  // (placing never goes past it: the capacity is what counting measured).
  void *alloc(size_t bytes, size_t align = kAlign) {
    const size_t at = (used_ + align - 1) & ~(align - 1);
    used_ = at + bytes;
    if (counting() || used_ > cap_) return nullptr;
    return base_ + at;
  }
  template <typename T>
  T *array(size_t n, size_t align = kAlign) {
    return static_cast<T *>(alloc(n * sizeof(T), align));
  }

 private:
  uint8_t *base_ = nullptr;
  size_t cap_ = 0;
  size_t used_ = 0;
};

}  // namespace gb
