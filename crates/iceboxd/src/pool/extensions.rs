//! Per-instance state of the techniques: each component keeps its own type here, attached
//! when the instance is created, so `Instance` holds only what every instance has and a new
//! technique needs no new field.

use std::any::{Any, TypeId};
use std::collections::HashMap;

/// A map from a type to the one value of that type. Filled before the instance is shared,
/// read-only afterwards (a component that changes its state keeps interior mutability in it).
#[derive(Default)]
pub struct Extensions(HashMap<TypeId, Box<dyn Any + Send + Sync>>);

impl Extensions {
    /// Attach `value`; a second value of the same type replaces the first.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) {
        self.0.insert(TypeId::of::<T>(), Box::new(value));
    }

    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.0.get(&TypeId::of::<T>())?.downcast_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::Extensions;

    #[derive(Debug, PartialEq)]
    struct Mode(u8);
    #[derive(Debug, PartialEq)]
    struct Other(&'static str);

    #[test]
    fn one_value_per_type_and_none_for_a_type_never_attached() {
        let mut ext = Extensions::default();
        ext.insert(Mode(1));
        ext.insert(Mode(2));
        assert_eq!(ext.get::<Mode>(), Some(&Mode(2)));
        assert_eq!(ext.get::<Other>(), None);
        ext.insert(Other("restored"));
        assert_eq!(ext.get::<Other>(), Some(&Other("restored")));
        assert_eq!(ext.get::<Mode>(), Some(&Mode(2)));
    }
}
