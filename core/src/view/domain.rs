//! View domains: which copy of rmm-core acquired a strided view, so that a check of the view is
//! asked of that copy.
//!
//! A process may hold several copies of rmm-core (librmm, and a Rust binary that links rmm-core
//! statically and routes to librmm's registry, such as a Python extension built on the `rmm` crate).
//! A view's generation names the copy that acquired it (its view domain, the bits above
//! [`VIEW_DOMAIN_SHIFT`]): 0 for the registry owner and for a binary with its own registry, 1.. for
//! the copies that route to an owner, numbered by the owner when they acquire their first view. The
//! owner calls the check function each copy registered ([`rmm_strided_view_register_domain`]); a
//! copy asks the owner about any view not its own ([`check_view`]).

use std::ffi::c_int;
use std::sync::{Mutex, OnceLock, PoisonError};

use super::strided::{check_alive, rmm_strided_view};
use crate::error::{Error, Result};
use crate::resource::guard::{guarded, null_out, put};
use crate::resource::status::{error_from_c, rmm_error, RMM_OK};

/// The bits of a view's generation above this shift are its view domain (see above).
pub const VIEW_DOMAIN_SHIFT: u32 = 48;

/// The most view domains an owner hands out.
const MAX_VIEW_DOMAINS: usize = 0xFFFF;

/// `int (const rmm_strided_view*, rmm_error*)`: one copy's check of a view it acquired
/// (`rmm_strided_view_check`'s type; `rmm_strided_view_check_fn` in C).
pub type ViewCheckFn = unsafe extern "C" fn(*const rmm_strided_view, *mut rmm_error) -> c_int;

/// `int rmm_strided_view_register_domain(rmm_strided_view_check_fn, uint32_t*, rmm_error*)`.
type RegisterViewDomainFn =
    unsafe extern "C" fn(Option<ViewCheckFn>, *mut u32, *mut rmm_error) -> c_int;

/// The check functions of the copies this owner numbered: domain `i + 1` is entry `i`.
fn view_checkers() -> &'static Mutex<Vec<ViewCheckFn>> {
    static CHECKERS: OnceLock<Mutex<Vec<ViewCheckFn>>> = OnceLock::new();
    CHECKERS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Served by the registry owner: numbers the calling copy of rmm-core (a new view domain in
/// `*domain_out`, 1..) and keeps its `check` for the views of that domain.
///
/// # Safety
/// `check` is NULL (refused) or a function that stays callable for the rest of the process;
/// `domain_out` and `err` are NULL or valid for writes.
pub unsafe extern "C" fn rmm_strided_view_register_domain(
    check: Option<ViewCheckFn>,
    domain_out: *mut u32,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract on both pointers.
    unsafe {
        guarded(err, || {
            let check =
                check.ok_or_else(|| Error::invalid("the view check function must not be NULL"))?;
            if domain_out.is_null() {
                return Err(null_out("domain"));
            }
            let mut checkers = view_checkers()
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if checkers.len() >= MAX_VIEW_DOMAINS {
                return Err(Error::invalid(
                    "no view domain left for another copy of rmm-core",
                ));
            }
            checkers.push(check);
            put(domain_out, checkers.len() as u32, "domain")
        })
    }
}

/// This copy's own view check, registered with the owner.
unsafe extern "C" fn check_own_view(view: *const rmm_strided_view, err: *mut rmm_error) -> c_int {
    // SAFETY: the owner passes the caller's pointers through (NULL or valid).
    unsafe {
        guarded(err, || {
            check_alive(
                view.as_ref()
                    .ok_or_else(|| Error::invalid("the view must not be NULL"))?,
            )
        })
    }
}

/// The view domain of this copy's views, as generation bits: 0 unless this copy routes to a
/// registry owner, which numbered it at its first view. An owner that cannot number it (an older
/// librmm) leaves it 0: then the owner cannot check this copy's views.
pub fn view_domain_bits() -> u64 {
    static BITS: OnceLock<u64> = OnceLock::new();
    *BITS.get_or_init(|| {
        let Some(table) = crate::registry::owner_table() else {
            return 0;
        };
        // SAFETY: rmm_c.h declares rmm_strided_view_register_domain as RegisterViewDomainFn.
        let Some(register) =
            (unsafe { table.symbol::<RegisterViewDomainFn>(c"rmm_strided_view_register_domain") })
        else {
            return 0;
        };
        let (mut domain, mut err) = (0u32, rmm_error::new());
        // SAFETY: an entry point of the owner, which stays loaded; `check_own_view` is a function of
        // this copy, which is never unloaded while the owner is (both stay for the process).
        let status = unsafe { register(Some(check_own_view), &mut domain, &mut err) };
        if status == RMM_OK && (1..=MAX_VIEW_DOMAINS as u32).contains(&domain) {
            u64::from(domain) << VIEW_DOMAIN_SHIFT
        } else {
            0
        }
    })
}

/// RMM_OK-or-error of `rmm_strided_view_check` for any view in the process: asked of the copy of
/// rmm-core that acquired it (this one, the owner, or another copy the owner numbered).
///
/// # Errors
/// [`Error::InvalidArgument`] for NULL, or a view that is not live (released, a stale copy, never
/// acquired, or of a copy nobody here knows).
///
/// # Safety
/// `view` is NULL or valid for reads.
pub unsafe fn check_view(view: *const rmm_strided_view) -> Result<()> {
    // SAFETY: caller contract.
    let Some(raw) = (unsafe { view.as_ref() }) else {
        return Err(Error::invalid("the view must not be NULL"));
    };
    let own = view_domain_bits() >> VIEW_DOMAIN_SHIFT;
    let domain = raw.generation >> VIEW_DOMAIN_SHIFT;
    let ask: Option<(ViewCheckFn, &str)> = if raw.generation == 0 || domain == own {
        None
    } else if own == 0 {
        // This copy is the owner: the copy that registered `domain`, if any.
        let checkers = view_checkers()
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        checkers
            .get(domain as usize - 1)
            .map(|f| (*f, "the copy of rmm-core that acquired it"))
    } else {
        crate::registry::owner_table()
            .and_then(|table| {
                // SAFETY: rmm_c.h declares rmm_strided_view_check as ViewCheckFn.
                unsafe { table.symbol::<ViewCheckFn>(c"rmm_strided_view_check") }
            })
            .map(|f| (f, "librmm"))
    };
    let Some((check, who)) = ask else {
        return check_alive(raw);
    };
    let mut err = rmm_error::new();
    // SAFETY: a check function of a loaded copy; `view` is readable (caller contract).
    let status = unsafe { check(view, &mut err) };
    if status == RMM_OK {
        Ok(())
    } else {
        Err(error_from_c(status, &err, who, "rmm_strided_view_check"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy's check that knows one view: generation 7 of its domain.
    unsafe extern "C" fn knows_seven(view: *const rmm_strided_view, err: *mut rmm_error) -> c_int {
        // SAFETY: check_view passes a readable view and a writable error.
        unsafe {
            guarded(err, || {
                match (*view).generation & ((1 << VIEW_DOMAIN_SHIFT) - 1) {
                    7 => Ok(()),
                    g => Err(Error::invalid(format!(
                        "generation {g} is not live over there"
                    ))),
                }
            })
        }
    }

    #[test]
    fn the_owner_asks_the_copy_that_acquired_a_view() {
        assert_eq!(
            view_domain_bits(),
            0,
            "the process's own registry: this copy is domain 0"
        );
        let (mut domain, mut err) = (0u32, rmm_error::new());
        // SAFETY: a function of this binary; valid out-pointers.
        let status =
            unsafe { rmm_strided_view_register_domain(Some(knows_seven), &mut domain, &mut err) };
        assert_eq!(status, RMM_OK);
        assert!(domain >= 1);
        let mut raw = rmm_strided_view::EMPTY;
        raw.generation = (u64::from(domain) << VIEW_DOMAIN_SHIFT) | 7;
        // SAFETY: a readable struct.
        let live = unsafe { check_view(&raw) };
        assert!(live.is_ok(), "the other copy says it is live");
        raw.generation += 1;
        // SAFETY: as above.
        let e = unsafe { check_view(&raw) }.unwrap_err();
        assert!(e.to_string().contains("not live over there"), "{e}");
        raw.generation = (0xFFFF << VIEW_DOMAIN_SHIFT) | 7;
        // SAFETY: as above.
        let e = unsafe { check_view(&raw) }.unwrap_err();
        assert!(
            e.to_string().contains("not live"),
            "a domain nobody registered: {e}"
        );
        // SAFETY: a NULL view and a NULL check are refused, not dereferenced.
        unsafe {
            assert!(check_view(std::ptr::null()).is_err());
            assert_ne!(
                rmm_strided_view_register_domain(None, &mut domain, &mut err),
                RMM_OK
            );
            assert_ne!(
                rmm_strided_view_register_domain(Some(knows_seven), std::ptr::null_mut(), &mut err),
                RMM_OK
            );
        }
    }

    #[test]
    fn views_of_this_copy_are_checked_here() {
        let released = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let view = crate::view::live::tests::view(&released);
        let raw = *view.as_raw();
        // SAFETY: a readable struct.
        assert!(unsafe { check_view(&raw) }.is_ok());
        drop(view);
        // SAFETY: as above.
        let e = unsafe { check_view(&raw) }.unwrap_err();
        assert!(e.to_string().contains("not live"), "{e}");
    }
}
