use super::*;
use crate::policy_source::Origin;

#[test]
fn every_origin_is_a_series_of_the_in_force_gauge() {
    for origin in [Origin::ConfigMap, Origin::LastGood] {
        // Exhaustive: a new origin does not compile here until it is listed above.
        match origin {
            Origin::ConfigMap | Origin::LastGood => {}
        }
        assert!(POLICY_ORIGINS.contains(&origin.as_str()), "{origin:?}");
    }
    assert!(POLICY_ORIGINS.contains(&"none"));
}
