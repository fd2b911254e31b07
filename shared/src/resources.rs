//! CPU and memory amounts, the only resources a resize can change.
//!
//! [`Resources`] holds millicores and bytes as integers (see [`crate::upstream::quantity`]) so that
//! sums, maxima and comparisons are exact, as they are in the kubelet's `framework.Resource`.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::upstream::quantity::{QuantityError, ResourceName};

/// A Kubernetes `ResourceList` (`requests`, `limits`, `allocatedResources`, …).
pub type ResourceList = BTreeMap<String, Quantity>;

/// An amount of CPU (millicores) and memory (bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// CPU in millicores.
    pub cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
}

impl Resources {
    /// Nothing.
    pub const ZERO: Resources = Resources { cpu: 0, memory: 0 };

    /// Builds an amount from millicores and bytes.
    pub const fn new(cpu: i64, memory: i64) -> Self {
        Resources { cpu, memory }
    }

    /// Reads cpu and memory from a resource list; absent entries are zero and other resources
    /// are ignored. Fails on a quantity that is not valid syntax.
    pub fn try_from_list(list: &ResourceList) -> Result<Self, QuantityError> {
        let mut out = Resources::ZERO;
        for name in ResourceName::ALL {
            if let Some(q) = list.get(name.key()) {
                out.set(name, name.amount(q)?);
            }
        }
        Ok(out)
    }

    /// Like [`Resources::try_from_list`], but an invalid quantity counts as absent. Objects read
    /// from the API server were validated there, so this only matters for hand-made input; the
    /// classifier checks syntax up front with [`crate::pod::validate_quantities`].
    pub fn from_list(list: &ResourceList) -> Self {
        let mut out = Resources::ZERO;
        for name in ResourceName::ALL {
            if let Some(Ok(v)) = list.get(name.key()).map(|q| name.amount(q)) {
                out.set(name, v);
            }
        }
        out
    }

    /// Same as [`Resources::from_list`] for an optional list.
    pub fn from_opt_list(list: Option<&ResourceList>) -> Self {
        list.map(Self::from_list).unwrap_or_default()
    }

    /// The amount of one resource.
    pub fn get(&self, name: ResourceName) -> i64 {
        match name {
            ResourceName::Cpu => self.cpu,
            ResourceName::Memory => self.memory,
        }
    }

    /// Sets the amount of one resource.
    pub fn set(&mut self, name: ResourceName, amount: i64) {
        match name {
            ResourceName::Cpu => self.cpu = amount,
            ResourceName::Memory => self.memory = amount,
        }
    }

    /// Per-resource maximum (upstream `maxResourceList`).
    pub fn max(self, other: Resources) -> Resources {
        Resources::new(self.cpu.max(other.cpu), self.memory.max(other.memory))
    }

    /// Per-resource positive part of `self - other`: what `self` needs beyond `other`.
    pub fn excess_over(self, other: Resources) -> Resources {
        Resources::new(
            self.cpu.saturating_sub(other.cpu).max(0),
            self.memory.saturating_sub(other.memory).max(0),
        )
    }

    /// True when every resource is at most the other's.
    pub fn fits_in(self, other: Resources) -> bool {
        self.cpu <= other.cpu && self.memory <= other.memory
    }

    /// True when both resources are zero.
    pub fn is_zero(&self) -> bool {
        self.cpu == 0 && self.memory == 0
    }

    /// The resources with a positive amount, cpu first.
    pub fn positive(&self) -> impl Iterator<Item = (ResourceName, i64)> + '_ {
        ResourceName::ALL
            .into_iter()
            .map(|n| (n, self.get(n)))
            .filter(|(_, v)| *v > 0)
    }

    /// The positive amounts in words, cpu first: `cpu 500m and memory 1Gi` (how messages and
    /// Events name a shortfall); empty when nothing is positive.
    pub fn positive_text(&self) -> String {
        self.positive()
            .map(|(n, v)| format!("{n} {}", n.format(v)))
            .collect::<Vec<_>>()
            .join(" and ")
    }
}

impl Resources {
    /// `op` applied to cpu and to memory alike.
    fn each(self, rhs: Resources, op: fn(i64, i64) -> i64) -> Resources {
        Resources::new(op(self.cpu, rhs.cpu), op(self.memory, rhs.memory))
    }
}

impl Add for Resources {
    type Output = Resources;
    fn add(self, rhs: Resources) -> Resources {
        self.each(rhs, i64::saturating_add)
    }
}

impl AddAssign for Resources {
    fn add_assign(&mut self, rhs: Resources) {
        *self = *self + rhs;
    }
}

impl Sub for Resources {
    type Output = Resources;
    fn sub(self, rhs: Resources) -> Resources {
        self.each(rhs, i64::saturating_sub)
    }
}

impl std::iter::Sum for Resources {
    fn sum<I: Iterator<Item = Resources>>(iter: I) -> Resources {
        iter.fold(Resources::ZERO, Add::add)
    }
}

impl fmt::Display for Resources {
    /// `cpu 550m, memory 512Mi`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cpu {}, memory {}",
            ResourceName::Cpu.format(self.cpu),
            ResourceName::Memory.format(self.memory)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pairs: &[(&str, &str)]) -> ResourceList {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    #[test]
    fn reads_cpu_and_memory_and_ignores_other_resources() {
        let r = Resources::from_list(&list(&[
            ("cpu", "250m"),
            ("memory", "64Mi"),
            ("ephemeral-storage", "1Gi"),
            ("nvidia.com/gpu", "1"),
        ]));
        assert_eq!(r, Resources::new(250, 64 << 20));
    }

    #[test]
    fn invalid_quantities_are_reported_by_the_strict_reader() {
        assert!(Resources::try_from_list(&list(&[("cpu", "lots")])).is_err());
        assert_eq!(
            Resources::from_list(&list(&[("cpu", "lots")])),
            Resources::ZERO
        );
    }

    #[test]
    fn arithmetic_is_per_resource_and_saturating() {
        let a = Resources::new(100, 10);
        let b = Resources::new(50, 20);
        assert_eq!(a + b, Resources::new(150, 30));
        assert_eq!(a.max(b), Resources::new(100, 20));
        assert_eq!(a.excess_over(b), Resources::new(50, 0));
        assert!(!a.fits_in(b));
        assert!(Resources::new(50, 10).fits_in(a));
        assert_eq!(
            Resources::new(i64::MAX, 0) + Resources::new(1, 0),
            Resources::new(i64::MAX, 0)
        );
    }

    #[test]
    fn names_only_the_positive_amounts_cpu_first() {
        assert_eq!(
            Resources::new(500, 1 << 30).positive_text(),
            "cpu 500m and memory 1Gi"
        );
        assert_eq!(Resources::new(0, 64 << 20).positive_text(), "memory 64Mi");
        assert_eq!(Resources::new(-5, 0).positive_text(), "");
    }

    #[test]
    fn displays_like_kubectl() {
        assert_eq!(
            Resources::new(550, 512 << 20).to_string(),
            "cpu 550m, memory 512Mi"
        );
    }
}
