//! OpenWhisk answers every path with and without a trailing slash.

/// Routing happens after layers see the request, so the slash goes before the router does:
/// `actions/hello/` is `actions/hello`.
pub fn trim_trailing_slash<B>(req: &mut axum::http::Request<B>) {
    let uri = req.uri();
    let path = uri.path();
    if path.len() <= 1 || !path.ends_with('/') {
        return;
    }
    let trimmed = path.trim_end_matches('/');
    let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
    let rebuilt = match uri.query() {
        Some(q) => format!("{trimmed}?{q}"),
        None => trimmed.to_string(),
    };
    let mut parts = uri.clone().into_parts();
    if let Ok(pq) = rebuilt.parse() {
        parts.path_and_query = Some(pq);
        if let Ok(uri) = axum::http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
    }
}
