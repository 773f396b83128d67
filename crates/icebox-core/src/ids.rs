//! Random identifiers: 128 bits as 32 lowercase hex digits, OpenWhisk's activation id form,
//! used for every id a client or a file may see.

pub fn random_hex128() -> String {
    format!("{:032x}", rand::random::<u128>())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_32_hex_digits_and_differ() {
        let (a, b) = (super::random_hex128(), super::random_hex128());
        assert_eq!(a.len(), 32);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }
}
