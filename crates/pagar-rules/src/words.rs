//! Newtypes' plumbing, written once: an enum stored and sent as one word per variant
//! ([`words!`](crate::words)), a newtype over a `String` read as text
//! ([`text_newtype!`](crate::text_newtype)), read by serde through its checked parser
//! ([`text_serde!`](crate::text_serde)), and one over an `i64` that serde reads through its
//! checked constructor ([`i64_newtype!`](crate::i64_newtype)).

/// An enum whose variants are stored and sent as one word each, with its `ALL` list, `as_str`,
/// `parse` (to the named error type, which says what was not known) and `Display`:
///
/// ```
/// pagar_rules::words! {
///     /// Where a thing stands.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Status / UnknownStatus("status desconhecido") {
///         /// Not yet.
///         Aguardando = "aguardando",
///         /// Done.
///         Aprovado = "aprovado",
///     }
/// }
/// assert_eq!(Status::parse("aprovado"), Ok(Status::Aprovado));
/// assert_eq!(Status::ALL.len(), 2);
/// assert_eq!(Status::parse("x").unwrap_err().to_string(), "status desconhecido: \"x\"");
/// ```
#[macro_export]
macro_rules! words {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident / $unknown:ident($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $word:literal, )+
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        #[doc = concat!("A stored or received word no [`", stringify!($name), "`] has.")]
        #[derive(Debug, Clone, PartialEq, Eq)]
        $vis struct $unknown(pub String);

        impl ::std::fmt::Display for $unknown {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, "{}: {:?}", $what, self.0)
            }
        }

        impl ::std::error::Error for $unknown {}

        impl $name {
            /// Every variant, in the order they are declared.
            pub const ALL: [$name; [$(stringify!($variant)),+].len()] = [$($name::$variant),+];

            /// The stored and wire word.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word, )+
                }
            }

            /// Parses the stored and wire word.
            pub fn parse(s: &str) -> ::std::result::Result<Self, $unknown> {
                match s {
                    $( $word => Ok($name::$variant), )+
                    _ => Err($unknown(s.to_string())),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// `AsRef<str>` and `Display` of a newtype whose field `.0` is a `String`.
#[macro_export]
macro_rules! text_newtype {
    ($($name:ty),+ $(,)?) => {
        $(
            impl ::std::convert::AsRef<str> for $name {
                fn as_ref(&self) -> &str {
                    &self.0
                }
            }

            impl ::std::fmt::Display for $name {
                fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                    f.write_str(&self.0)
                }
            }
        )+
    };
}

/// `TryFrom<String>` through the type's own checked `parse(&str)` (returning the named error)
/// and `From<T> for String`: what serde's `try_from = "String", into = "String"` needs of a text
/// newtype whose field `.0` is a `String`.
#[macro_export]
macro_rules! text_serde {
    ($name:ty, $error:ty) => {
        impl ::std::convert::TryFrom<::std::string::String> for $name {
            type Error = $error;
            fn try_from(s: ::std::string::String) -> ::std::result::Result<Self, $error> {
                Self::parse(&s)
            }
        }

        impl ::std::convert::From<$name> for ::std::string::String {
            fn from(v: $name) -> ::std::string::String {
                v.0
            }
        }
    };
}

/// `TryFrom<i64>` through the type's own checked `new` (returning the named error) and
/// `From<T> for i64`: what serde's `try_from = "i64", into = "i64"` needs of an amount.
#[macro_export]
macro_rules! i64_newtype {
    ($name:ty, $error:ty) => {
        impl ::std::convert::TryFrom<i64> for $name {
            type Error = $error;
            fn try_from(v: i64) -> ::std::result::Result<Self, $error> {
                Self::new(v)
            }
        }

        impl ::std::convert::From<$name> for i64 {
            fn from(v: $name) -> i64 {
                v.0
            }
        }
    };
}
