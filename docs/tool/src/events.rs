//! The Events reference: every reason of `resize_guard_policy::event_reason::EventReason`, the
//! one enum both programs record Events with, with its type, object, recorder and meaning.

use resize_guard_policy::event_reason::EventReason;

use crate::table;

/// The Events reference page.
pub fn page() -> String {
    let mut out = crate::pages::header("shared/src/event_reason.rs");
    out.push_str(
        "# Events\n\n\
         Every Kubernetes Event resize-guard records, by `reason` (`kubectl get events \
         --field-selector reason=PreemptionStalled`). Repeats of one Event on one object are \
         folded into a series by the recorder; the Event's note says what happened to which \
         pod and why.\n\n",
    );
    let rows: Vec<Vec<String>> = EventReason::ALL
        .iter()
        .map(|r| {
            vec![
                format!("`{}`", r.as_str()),
                r.type_str().to_owned(),
                r.regarding().to_owned(),
                r.recorder().as_str().to_owned(),
                r.meaning().to_owned(),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &["Reason", "Type", "Recorded on", "Recorded by", "Meaning"],
        &rows,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_a_row() {
        let page = page();
        for r in EventReason::ALL {
            assert!(
                page.contains(&format!("| `{}` | {} |", r.as_str(), r.type_str())),
                "{r} missing from\n{page}"
            );
        }
        assert!(
            page.contains("| `InvalidPolicy` | Warning | the policy ConfigMap |"),
            "{page}"
        );
    }
}
