//! The webhook's certificates: issued and rotated by the controller, served by the webhook from
//! its Secret.

mod rotation;
mod serving_secret;
