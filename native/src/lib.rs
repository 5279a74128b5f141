//! kafkamc's native search core (issue 40), imported from Python as `kafkamc._core`.
//!
//! The logic lives in plain Rust modules that `cargo test` runs without Python; the
//! `python` feature (on in pyproject.toml's build) adds thin PyO3 wrappers and the module.

pub mod bytes;
pub mod part;
pub mod tables;
pub mod verdicts;
pub mod visited;

#[cfg(feature = "python")]
pub mod search;

#[cfg(feature = "python")]
use pyo3::prelude::*;

/// The crate version, so Python can tell which core it loaded.
#[cfg(feature = "python")]
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Panics on purpose: tests/test_native.py checks that a panic reaches Python as
/// `pyo3_runtime.PanicException` (the release profile's panic = "unwind"), not an abort.
#[cfg(feature = "python")]
#[pyfunction]
fn _panic(message: &str) {
    panic!("{message}");
}

/// The module `kafkamc._core`: register each function and class here.
#[cfg(feature = "python")]
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // A panic's message reaches Python in its PanicException, which the command line reports
    // as one line; Rust's default hook would print it, and a backtrace, to stderr first.
    std::panic::set_hook(Box::new(|_| {}));
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(_panic, m)?)?;
    m.add_class::<visited::PyFpSet>()?;
    m.add_class::<search::Core>()?;
    Ok(())
}
