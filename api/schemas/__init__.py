"""Request and response models, one module per resource; :mod:`api.schemas.common` holds what they share.

Until refactor/tasks is merged, the task router still imports its four shared names from here: they are
re-exported below for it alone, and this re-export goes once its imports name :mod:`api.schemas.common`.
"""

from api.schemas.common import MAX_SAFE_INTEGER, Integer, ShortText, StrictRequest

__all__ = ["MAX_SAFE_INTEGER", "Integer", "ShortText", "StrictRequest"]
