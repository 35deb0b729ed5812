"""The simulator log reader's former address: :mod:`hilsim.simmodel.gpgpusim.simlog`.

Kept only for the two readers that still import it from here (the ``gpgpusim-log``
importer and ``hilsim validate``); new code imports :mod:`hilsim.simmodel.gpgpusim.simlog`.
"""

from hilsim.simmodel.gpgpusim.simlog import read_log_text, read_simlogs

__all__ = ["read_log_text", "read_simlogs"]
