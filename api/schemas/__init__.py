"""Request and response models, one module per resource; :mod:`api.schemas.common` holds what they share."""
