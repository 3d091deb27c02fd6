use thiserror::Error;

/// What can go wrong with CRSs, layers and rasterisation.
#[derive(Debug, Error)]
pub enum GeomError {
    /// A CRS string or WKT that resolves to no CRS of the bundled EPSG table.
    #[error("unknown CRS `{crs}`: {why}")]
    UnknownCrs {
        /// The CRS as given (WKT shortened).
        crs: String,
        /// Why it cannot be resolved, and what to give instead.
        why: String,
    },
    /// A CRS that proj4rs cannot reproject from or to.
    #[error("cannot reproject {crs}: {why}")]
    Unprojectable {
        /// The CRS, described.
        crs: String,
        /// Why.
        why: String,
    },
    /// A layer file that cannot be read.
    #[error("reading layer {layer}: {why}")]
    Read {
        /// The layer's name (its file name).
        layer: String,
        /// What is wrong, where.
        why: String,
    },
    /// A layer with no CRS of its own and none given by the caller.
    #[error("layer {layer} has no CRS ({why}); give it explicitly (--labels-crs EPSG:<code>)")]
    NoCrs {
        /// The layer's name.
        layer: String,
        /// Where a CRS was looked for.
        why: String,
    },
    /// A layer without features, or without a polygon to burn.
    #[error("layer {layer} has no polygon features{detail}")]
    EmptyLayer {
        /// The layer's name.
        layer: String,
        /// What the layer did hold (`; 3 features were skipped: …`), or nothing.
        detail: String,
    },
    /// An attribute field the caller named is not in the layer.
    #[error("layer {layer} has no field `{field}`; its fields are: {}", fields_list(.fields))]
    MissingField {
        /// The layer's name.
        layer: String,
        /// The field asked for.
        field: String,
        /// The fields the layer has.
        fields: Vec<String>,
    },
    /// A scene grid that cannot map world coordinates to pixels.
    #[error("unusable geotransform {transform:?}: {why}")]
    BadTransform {
        /// The transform `[x0, a, b, y0, d, e]` as given.
        transform: [f64; 6],
        /// What is wrong with it.
        why: &'static str,
    },
    /// A scene without a CRS, which a layer cannot be reprojected to.
    #[error("scene {scene} has no CRS: {why}")]
    SceneCrs {
        /// The scene's name.
        scene: String,
        /// Why.
        why: String,
    },
    /// A value of the caller's configuration that cannot be used.
    #[error("{0}")]
    Config(String),
}

fn fields_list(fields: &[String]) -> String {
    if fields.is_empty() {
        "(none)".into()
    } else {
        fields.join(", ")
    }
}
