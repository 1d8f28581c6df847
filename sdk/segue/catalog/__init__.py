"""The model catalog: versioned JSON files, validated at load, with the configuration cascade resolved once.

Layers, later wins per row key (model type id; model id; vendor id; (model, vendor, role)): the packaged
`catalogs/`, then each directory of `SEGUE_CATALOG_PATH` (os.pathsep-separated), then `extra_dirs`. Rows are
replaced whole, so an app's row says everything about that row. Within one directory an id is defined once.

Configuration bags cascade per serving path, later wins: model type < model < the vendor's `model_defaults` <
the inference provider's model-vendor row. Objects merge per key; arrays, scalars and explicit null replace;
absent keys inherit; model-developer rows never contribute. A model the catalog does not list resolves from the
default model type (`default_for_unknown_models`) and the vendor's defaults; `Resolved.note` says so. The table of
every serving path (and a vendor-less entry per model) is built once in `Catalog.load`; lookups afterwards are dict
reads. Nothing about a vendor is written in this module: it is all catalog data.

"""

from segue.catalog.cascade import ExplainedKey, Resolved, Source, merge_configs
from segue.catalog.errors import CatalogError, CatalogLookupError
from segue.catalog.files import CURRENT_VERSION, MIGRATIONS, known_versions, packaged_catalog_dir
from segue.catalog.pricing import Prices
from segue.catalog.resolver import Catalog, check_dir

__all__ = [
    "CURRENT_VERSION",
    "MIGRATIONS",
    "Catalog",
    "CatalogError",
    "CatalogLookupError",
    "ExplainedKey",
    "Prices",
    "Resolved",
    "Source",
    "check_dir",
    "known_versions",
    "merge_configs",
    "packaged_catalog_dir",
]
