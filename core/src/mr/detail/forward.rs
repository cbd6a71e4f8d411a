//! What every sub-allocator and adaptor over one upstream writes alike in its `impl MemoryResource`
//! ([`forward_to_upstream!`]), so that each keeps only what it does differently.

/// Writes, inside an adaptor's or sub-allocator's `impl MemoryResource`:
/// - `name`: the given literal, RMM's name (the kind test in `mr/kind.rs` checks it against the
///   kind table);
/// - `is_equal`: true for an adaptor of the same type sharing the `identity` field (an `Arc`), so
///   clones are equal and separately made adaptors are not;
/// - `upstream`: `Some` of what the type's inherent accessor `upstream:` (`fn(&self) ->
///   &AnyResource`) returns;
/// - for each name after `forward:` (optional), that method passed straight to the upstream:
///   `access`, `deallocate` (the free goes to the upstream with the same arguments).
///
/// ```ignore
/// impl MemoryResource for PrefetchResourceAdaptor {
///     fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> { .. }
///
///     forward_to_upstream! {
///         name: "prefetch_resource_adaptor",
///         upstream: upstream,
///         identity: identity,
///         forward: access, deallocate,
///     }
/// }
/// ```
macro_rules! forward_to_upstream {
    (
        name: $name:literal,
        upstream: $upstream:ident,
        identity: $identity:ident
        $(, forward: $($method:ident),*)? $(,)?
    ) => {
        fn name(&self) -> &str {
            $name
        }

        fn is_equal(&self, other: &dyn $crate::resource::MemoryResource) -> bool {
            $crate::resource::downcast::<Self>(other)
                .is_some_and(|o| ::std::sync::Arc::ptr_eq(&self.$identity, &o.$identity))
        }

        fn upstream(&self) -> Option<&$crate::resource::AnyResource> {
            // The inherent accessor (inherent items come before the trait's in a path).
            Some(Self::$upstream(self))
        }

        $($($crate::mr::detail::forward::forward_to_upstream!(@$method $upstream);)*)?
    };
    (@access $upstream:ident) => {
        fn access(&self) -> $crate::resource::Access {
            Self::$upstream(self).access()
        }
    };
    (@deallocate $upstream:ident) => {
        unsafe fn deallocate(
            &self,
            stream: $crate::cuda::Stream,
            ptr: *mut u8,
            bytes: usize,
            alignment: usize,
        ) -> $crate::error::Result<()> {
            // SAFETY: forwarded caller contract; the memory came from the upstream with these
            // arguments.
            unsafe { Self::$upstream(self).deallocate(stream, ptr, bytes, alignment) }
        }
    };
}
pub(crate) use forward_to_upstream;
