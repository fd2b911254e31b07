//! Assertions on what the programs and tools print.

/// Asserts that `text` contains every one of `wanted`; the failure names the first one missing,
/// with `text`.
#[track_caller]
pub fn assert_contains_all<S: AsRef<str>>(text: &str, wanted: &[S]) {
    for want in wanted {
        let want = want.as_ref();
        assert!(text.contains(want), "{want:?} missing in:\n{text}");
    }
}
