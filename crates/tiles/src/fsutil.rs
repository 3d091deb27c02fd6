//! Where tiles' writes meet [`fsio`], segfit's one atomic write: its errors become
//! [`TilesError::Io`], naming the path.

use crate::error::TilesError;

impl From<fsio::FsioError> for TilesError {
    fn from(e: fsio::FsioError) -> Self {
        let (path, source) = e.into_parts();
        TilesError::Io { path, source }
    }
}
