//! The Vertical Pod Autoscaler, built from its Go module: the updater's in-place resizes, the
//! recommender, and the whole loop from usage to the kubelet.

mod recommender;
mod updater;
mod usage_loop;
