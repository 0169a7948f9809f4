// A move-only type-erased callable with inline storage, for completion handlers (the type of
// Connection::Handler and Endpoint::ConnectHandler).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace timerwheel::rudp {

template <class Signature, std::size_t InlineSize = 64>
class UniqueFunction;

// Like std::function, but holds move-only callables (Asio handlers often are), and keeps
// callables of up to kInlineSize bytes inline so that queuing a typical lambda allocates nothing.
// A wrapper that holds another UniqueFunction (an adapter between signatures) needs a larger
// InlineSize than the function it wraps, or it allocates.
template <class R, class... Args, std::size_t InlineSize>
class UniqueFunction<R(Args...), InlineSize> {
 public:
  static constexpr std::size_t kInlineSize = InlineSize;
  // Whether a callable of type D is held inline: then holding it allocates nothing and cannot
  // throw.
  template <class D>
  static constexpr bool kHoldsInline =
      sizeof(D) <= kInlineSize &&
      alignof(D) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<D>;

  UniqueFunction() noexcept = default;
  UniqueFunction(std::nullptr_t) noexcept {}  // NOLINT: implicit, like std::function

  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same_v<D, UniqueFunction> &&
                                     std::is_invocable_r_v<R, D&, Args...>>>
  UniqueFunction(F&& function) {  // NOLINT: implicit, like std::function
    if constexpr (kHoldsInline<D>) {
      ::new (static_cast<void*>(&m_storage)) D(std::forward<F>(function));
      m_ops = &kInlineOps<D>;
    } else {
      *reinterpret_cast<D**>(&m_storage) = new D(std::forward<F>(function));
      m_ops = &kHeapOps<D>;
    }
  }

  UniqueFunction(UniqueFunction&& other) noexcept { MoveFrom(other); }
  UniqueFunction& operator=(UniqueFunction&& other) noexcept {
    if (this != &other) {
      Reset();
      MoveFrom(other);
    }
    return *this;
  }
  UniqueFunction(const UniqueFunction&) = delete;
  UniqueFunction& operator=(const UniqueFunction&) = delete;
  ~UniqueFunction() { Reset(); }

  explicit operator bool() const noexcept { return m_ops != nullptr; }

  R operator()(Args... args) { return m_ops->invoke(&m_storage, std::forward<Args>(args)...); }

  // The callable held, if it is a D (as std::function::target); else nullptr. So that a caller
  // whose hand-over failed can take back what it put in.
  template <class D>
  D* Target() noexcept {
    if (m_ops == &kInlineOps<D>) return std::launder(reinterpret_cast<D*>(&m_storage));
    if (m_ops == &kHeapOps<D>) return *reinterpret_cast<D**>(&m_storage);
    return nullptr;
  }

 private:
  struct Ops {
    R (*invoke)(void* storage, Args&&... args);
    void (*move)(void* from, void* to) noexcept;  // move-constructs into `to`, destroys `from`
    void (*destroy)(void* storage) noexcept;
  };
  template <class D>
  static constexpr Ops kInlineOps{[](void* s, Args&&... args) -> R {
                                    return (*static_cast<D*>(s))(std::forward<Args>(args)...);
                                  },
                                  [](void* from, void* to) noexcept {
                                    ::new (to) D(std::move(*static_cast<D*>(from)));
                                    static_cast<D*>(from)->~D();
                                  },
                                  [](void* s) noexcept { static_cast<D*>(s)->~D(); }};
  template <class D>
  static constexpr Ops kHeapOps{
      [](void* s, Args&&... args) -> R {
        return (**static_cast<D**>(s))(std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept { *static_cast<D**>(to) = *static_cast<D**>(from); },
      [](void* s) noexcept { delete *static_cast<D**>(s); }};

  void MoveFrom(UniqueFunction& other) noexcept {
    if (other.m_ops != nullptr) {
      other.m_ops->move(&other.m_storage, &m_storage);
      m_ops = other.m_ops;
      other.m_ops = nullptr;
    }
  }
  void Reset() noexcept {
    if (m_ops != nullptr) {
      m_ops->destroy(&m_storage);
      m_ops = nullptr;
    }
  }

  std::aligned_storage_t<kInlineSize, alignof(std::max_align_t)> m_storage;
  const Ops* m_ops = nullptr;
};

}  // namespace timerwheel::rudp
