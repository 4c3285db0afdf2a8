from mcpd.cli import main

main()
