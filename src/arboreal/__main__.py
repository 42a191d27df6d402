from arboreal.cli import main

raise SystemExit(main())
