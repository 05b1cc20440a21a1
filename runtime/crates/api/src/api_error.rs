//! The classes of API errors the runtime acts on, read from a `kube::Error`
//! in one place instead of comparing status codes at every call site.

/// What an API server's answer means for the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiErrorClass {
    /// 404: the object (or its kind) is not there.
    NotFound,
    /// 409 with reason `AlreadyExists`: a create met an object of that name.
    AlreadyExists,
    /// 409 otherwise: a stale resourceVersion; read again and retry.
    Conflict,
    /// Anything else, including transport errors.
    Other,
}

impl ApiErrorClass {
    pub fn of(e: &kube::Error) -> Self {
        match e {
            kube::Error::Api(s) if s.code == 404 => ApiErrorClass::NotFound,
            kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists" => ApiErrorClass::AlreadyExists,
            kube::Error::Api(s) if s.code == 409 => ApiErrorClass::Conflict,
            _ => ApiErrorClass::Other,
        }
    }
}
