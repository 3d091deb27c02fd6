//! The `#[needs_fixtures]` attribute of `testkit` (re-exported there; use it from there).
#![deny(missing_docs)]

use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

/// Prefixes the item with `#[ignore = "<reason>"]` when the build script found no shared
/// fixtures outside CI; otherwise returns it unchanged. Takes no arguments.
#[proc_macro_attribute]
pub fn needs_fixtures(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return "compile_error!(\"#[needs_fixtures] takes no arguments\");"
            .parse()
            .unwrap();
    }
    let mut out = TokenStream::new();
    if let Some(reason) = skip_reason() {
        let inner: TokenStream = [
            TokenTree::Ident(Ident::new("ignore", Span::call_site())),
            TokenTree::Punct(Punct::new('=', Spacing::Alone)),
            TokenTree::Literal(Literal::string(reason)),
        ]
        .into_iter()
        .collect();
        out.extend([
            TokenTree::Punct(Punct::new('#', Spacing::Alone)),
            TokenTree::Group(Group::new(Delimiter::Bracket, inner)),
        ]);
    }
    out.extend(item);
    out
}

#[cfg(segfit_no_fixtures)]
fn skip_reason() -> Option<&'static str> {
    Some(env!("SEGFIT_SKIP_REASON"))
}

#[cfg(not(segfit_no_fixtures))]
fn skip_reason() -> Option<&'static str> {
    None
}
