import sys

from memoryd.cli.main import main

sys.exit(main())
